"""The benchmarks: ``python -m benchmarks run NAME`` reproduces a published number (see README.md here).

A regular package so that, from the repository root, ``python -m benchmarks`` finds this folder before any
installed distribution's top-level ``benchmarks`` (Opacus installs one).
"""
