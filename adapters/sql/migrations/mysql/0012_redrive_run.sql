-- hookrelay schema version 12: redrives.redrive_run numbers a redrive's
-- runs (hookrelay.RedriveAudit.Run): 1 for the run Redrive starts, one
-- more at each resume, so a run that a resume overtook before it saw its
-- stop ends instead of going on beside the new one. Entries written
-- before keep 0.
ALTER TABLE {p}redrives ADD COLUMN redrive_run BIGINT NOT NULL DEFAULT 0;
