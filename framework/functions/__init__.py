"""User functions: what a project's udfs/*.py register, and how Tributary finds them.

An analyst writes plain Python in udfs/ and marks what Tributary may call:

    from framework.functions import group_function, udf

    @udf(returns="double")
    def fahrenheit(celsius):                      # pandas Series -> Series, called from SQL
        return celsius * 9 / 5 + 32

    @group_function(returns="pair string, correlation double")
    def best_pair(events, state, args):           # one closed group of a `group:` step
        ...

Tributary imports udfs/ itself (framework.functions.loader), before `validate` checks a template
and before a run starts Spark; the decorators only record the functions, they do not change them.
"""

from framework.functions.registry import GroupFunction, SqlFunction, group_function, udf

__all__ = ["GroupFunction", "SqlFunction", "group_function", "udf"]
