"""The stages built into the core package (each one module, one :class:`~dolma_pipe.stage.Stage`)."""
