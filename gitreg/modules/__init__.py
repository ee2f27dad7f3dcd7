"""Module publishing: which git tags become which module versions, and what
their archives contain.

`publisher` decides, per repository, which tags are new versions, which are
conflicts with a published version (immutable, G4) and which are ignored, and
records them; `archive` decides what of a git tree goes into a module's
`.tar.gz` (checklist A1-A6). The vocabulary shared with providers and the
mirror (`gitreg.versions`, `gitreg.addresses`) stays at the top level.
"""
