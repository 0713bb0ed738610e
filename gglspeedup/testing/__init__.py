"""Test helpers other test suites can import: a reference sampler and output checks.

- :func:`reference_sample`: a pure-Python/NumPy re-implementation of the sampling contract and
  RNG, for exact comparisons on small graphs.
- :func:`check_sample`: every invariant a sampler output must keep (raises ``AssertionError``).
- :func:`assert_same_sample`: two outputs identical bit for bit.
"""

from .checks import assert_same_sample, check_sample
from .reference import reference_draw, reference_hop_state, reference_sample

__all__ = ["reference_sample", "reference_hop_state", "reference_draw", "check_sample", "assert_same_sample"]
