"""Documentation extracted from a module version at publish time.

`hcl.py` reads a Terraform module's interface (plain files through `hcl_plain.py`,
the others through python-hcl2, as lark parses: `hcl_reduce.py`), `readme.py` renders READMEs to
safe HTML, and `extract.py` turns the files of one published tree into the
immutable document stored beside the version (storage/catalog.py).
"""
