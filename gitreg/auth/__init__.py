"""Who may read and publish: API tokens, namespace visibility, signed download URLs."""
