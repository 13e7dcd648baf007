# SPDX-License-Identifier: MIT
"""testtools.matchers as tooz's tests use them: match() is None on a match,
else a description of the mismatch."""


class MatchesException:
    def __init__(self, exc_class):
        self.exc_class = exc_class

    def match(self, exc):
        if isinstance(exc, self.exc_class):
            return None
        return f"{exc!r} is not a {self.exc_class.__name__}"


class MatchesAny:
    def __init__(self, *matchers):
        self.matchers = matchers

    def match(self, value):
        mismatches = [m.match(value) for m in self.matchers]
        if any(m is None for m in mismatches):
            return None
        return "; ".join(mismatches)


class Raises:
    def __init__(self, exc_matcher):
        self.exc_matcher = exc_matcher

    def match(self, callable_obj):
        try:
            callable_obj()
        except Exception as e:
            return self.exc_matcher.match(e)
        return "no exception raised"
