"""Modules: which git tags become which module versions, and serving and
curating those versions (`service`: the modules.v1 answers, yank, deprecation).

`publisher` decides, per repository, which tags are new versions, which are
conflicts with a published version (immutable) and which are ignored, and
records them. What of a git tree goes into a module's `.tar.gz` is
`gitreg.archives.build`, below this package: git, the catalog and the
module proxy build or read archives too. The vocabulary shared with providers
and the mirror (`gitreg.versions`, `gitreg.addresses`) stays at the top level.
"""
