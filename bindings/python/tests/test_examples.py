# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runs the pytest-style examples of bindings/python/examples under unittest
(ctest capi_python, capi_python_pip): each ``test_*`` function of each
``examples/test_*.py`` becomes a test method."""

import glob
import importlib.util
import os
import unittest

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples")


def _load(path):
    name = "tickwheel_example_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_tests(loader, standard_tests, pattern):
    suite = unittest.TestSuite(standard_tests)
    paths = sorted(glob.glob(os.path.join(EXAMPLES, "test_*.py")))
    if not paths:
        raise RuntimeError("no examples found in %s" % os.path.normpath(EXAMPLES))
    for path in paths:
        module = _load(path)
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("test_") and callable(fn):
                suite.addTest(unittest.FunctionTestCase(fn, description="%s: %s" % (os.path.basename(path), name)))
    return suite
