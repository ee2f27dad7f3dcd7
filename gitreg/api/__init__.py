"""HTTP protocols, one module each; `gitreg.app` joins their routes."""
