-- How the cloud bills each instance (src/model/billing.ts): at least billing_minimum_ms, then whole
-- increments of billing_increment_ms, each started one paid in full. The dispatcher writes its rule (the
-- scheduler keys min_billing_period and billing_period); older rows are billed per second, no minimum.
ALTER TABLE instances ADD COLUMN billing_minimum_ms bigint NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN billing_increment_ms bigint NOT NULL DEFAULT 1000
  CHECK (billing_increment_ms > 0);
