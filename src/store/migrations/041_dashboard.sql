-- The dashboard (docs/DASHBOARD.md): samples for its charts, and one-time sign-in links.

-- One row per sampling interval (the server samples; several servers write the same bucket once).
CREATE TABLE dashboard_samples (
  at timestamptz PRIMARY KEY,
  queued integer NOT NULL,
  running integer NOT NULL,
  -- live instances by type: {"small": 3}
  instances jsonb NOT NULL,
  spend_per_hour double precision NOT NULL
);

-- A link that signs its holder in once, as the token that asked for it (berth dashboard, berth up).
CREATE TABLE dashboard_signins (
  -- sha256 of the code; the code itself is only in the link
  hash text PRIMARY KEY,
  token_id bigint NOT NULL REFERENCES tokens (id),
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
