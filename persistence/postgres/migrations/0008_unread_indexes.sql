-- No query reads decisions by agent or by run: every decision paid an index
-- entry (and, for run_id, a random leaf page) in each of these for nothing.
DROP INDEX decisions_agent;
DROP INDEX decisions_run;
