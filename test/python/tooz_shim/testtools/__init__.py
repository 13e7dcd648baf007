# SPDX-License-Identifier: MIT
"""The few pieces of testtools that tooz's own functional tests
(tooz/tests/test_coordination.py) use, for test_tooz.py's run of them where
python3-testtools is not installed (it is preferred when it is)."""
