"""`deploy bench`: load-test an endpoint through the SDK and price what it serves.

    inputs.py    request inputs: generated from the manifest's tensor specs, or read from a file
    target.py    where the load goes (endpoint, URL, region, manifest): opens an SDK `Endpoint`
    outcomes.py  each call's outcome, and SDK errors sorted into the classes a report counts
    worker.py    one load-generator process: closed-loop or fixed-rate threads over the SDK
    runner.py    the worker processes, the steps they run, the probe call before any load
    report.py    per-step statistics (throughput, latency percentiles, errors, client CPU, cost)
    cost.py      cost per million inferences from the price table `deploy up` uses
    compare.py   two reports side by side: throughput and p99 regressions for release gates
    plot.py      latency against throughput as a self-contained HTML page (inline SVG)
    sweep.py     config variants of one model served on a local endpoint, the best in a budget

Requests go through `deploy.client.Endpoint.infer`, the path an application
takes (Triton's binary protocol; SigV4 on AWS), from worker processes that
scale with the concurrency, so the client is not what a report measures.
"""
