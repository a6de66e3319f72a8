"""Built-in taggers, one module each; every module here is imported by the registry."""
