"""`python -m modstream.jobs.moderation` (and `flink run -pym modstream.jobs.moderation`): the
job."""

from modstream.jobs.moderation.job import main

raise SystemExit(main())
