"""A rank that dies of SIGABRT, as one does when C++ code calls std::terminate (tests/test_launch.py)."""

import os


def die_in_native_code() -> None:
    os.abort()


if __name__ == "__main__":
    die_in_native_code()
