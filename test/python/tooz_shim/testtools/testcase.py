# SPDX-License-Identifier: MIT
"""testtools.testcase as tooz's tests use it: on unittest."""
import unittest

TestSkipped = unittest.SkipTest


class TestCase(unittest.TestCase):
    def useFixture(self, fixture):
        fixture.setUp()
        self.addCleanup(fixture.cleanUp)
        return fixture

    def assertThat(self, matchee, matcher):
        mismatch = matcher.match(matchee)
        if mismatch is not None:
            raise self.failureException(mismatch)


def Nullary(callable_obj, *args, **kwargs):
    return lambda: callable_obj(*args, **kwargs)
