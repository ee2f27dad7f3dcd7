"""Module archives: built from git objects, byte for byte reproducible."""
