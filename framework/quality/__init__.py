"""Quality of pipeline outputs: expectation suites (Great Expectations) and integration metrics against ground truth."""
