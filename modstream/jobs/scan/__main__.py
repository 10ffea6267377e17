"""`python -m modstream.jobs.scan` (and `flink run -pym modstream.jobs.scan`): the job."""

from modstream.jobs.scan.job import main

raise SystemExit(main())
