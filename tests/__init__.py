"""The test suite, laid out as the package is (tests/ops tests fullgraph/ops, ...).

Every test folder is a package (an ``__init__.py``) so that pytest imports a test module by its
dotted path from the repository root (``tests.parallel.test_spmm``): two folders may then hold
modules of the same name, and the shared helpers import as ``tests.distributed``,
``tests.dist_worker`` and ``tests._equality`` from any folder and from the ranks' processes.
"""
