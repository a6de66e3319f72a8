"""Test support: everything the suite shares that is not a test, one module per subject.

Test modules and the ``conftest.py`` files import from here; nothing here imports a test module.

- where things are: ``repo`` (the checkout, the sample corpus)
- inputs: ``documents`` (synthetic and sample documents, corpora), ``tokens`` (a small tokenizer)
- running and comparing: ``cli`` (``python -m dolma_pipe``), ``outputs`` (markers, outputs as
  bytes), ``processes`` (free ports, a run killed mid-way, what a test left running)
- environments: ``s3`` (a moto server), ``ray_cluster`` (a local Ray), ``namespaces`` (a node
  with its own ``/tmp``), ``skips`` (a missing dependency, a failure under CI), ``venvs`` (a new
  virtual environment holding a wheel's declared dependencies)
- stages: ``phased_stage`` (a three-phase example stage), ``dedup``, ``index``, ``mixes``,
  ``mix_search``, ``report_pipeline`` (each stage's corpora and runs), ``slow_tokenize``,
  ``slow_mix`` (a stage slowed so that a test can kill it)
- the trainer: ``train_launcher`` (a stage-1 run, test hooks around the trainer),
  ``train_pausing`` (ranks paused after a step), ``checkpoints``, ``preflight_faults`` (faults for
  the pre-flight checks), ``slow_rank`` (a rank whose blocks run slower)
- the tests of the code's shape: ``imports`` (a module's imports from its syntax tree)

Some modules are also started by module path (``python -m tests.support.<name>``: a stage slowed
so that a test can kill it, the trainer with test hooks) or pickled to workers by class name, so
their names are part of what the tests run. ``tests/test_suite_guards.py`` holds that no other
non-test module lives under ``tests/``.
"""
