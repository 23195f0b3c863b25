-- How many schedules of each campaign step were cancelled (the campaign cancelled, or one
-- recipient's remaining steps): counted in the transaction that deletes them, so the
-- console's per-step progress can say "cancelled" once the schedules are gone.
CREATE TABLE campaign_step_counts (
    campaign  text NOT NULL,
    step      text NOT NULL,
    cancelled bigint NOT NULL,
    PRIMARY KEY (campaign, step)
);
