"""The CLI's commands, one module per group; `gitreg.cli` parses and dispatches."""
