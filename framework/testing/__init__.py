"""`tributary test`: a pipeline's unit tests (framework.spec.tests) run over given rows.

Why a package of its own: a test runs the engine's code over a plan cut down to it (the checked
step and what lies between it and the given rows), so it needs the project context and the engine
below it, and the command line above it stays thin. Reading and checking the tests (suite), typing
rows and comparing them (rows), the batch run of one test (batch), a whole command's tests (run)
and the JUnit report (junit) are one module each.
"""
