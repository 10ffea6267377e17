"""The scan job (`python -m modstream.jobs.scan`): detector pools per modality over
scan.requests.*, with admission under overload (modstream.scanning) and the detectors."""
