"""Test support: everything the suite shares that is not a test, one module per subject.

Test modules and the ``conftest.py`` files import from here; nothing here imports a test module.
Some modules are also started by module path (``python -m tests.support.<name>``: a stage slowed
so that a test can kill it, the trainer with test hooks) or pickled to workers by class name, so
their names are part of what the tests run. ``tests/test_suite_guards.py`` holds that no other
non-test module lives under ``tests/``.
"""
