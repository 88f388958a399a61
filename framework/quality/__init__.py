"""Quality of pipeline outputs: integration metrics against ground truth (and, later, expectation suites)."""
