-- additive: it only removes rows no release pushes or shows (subscriptions of deleted queues).
-- A queue's push subscription is deleted with the queue (store.delete_queue, from this
-- release on). Those an older release left behind when their queue was deleted are
-- pushed by no one and listed by nothing: removed here, with their slots and failures.
-- (`push_subscriptions.held_until` is no longer written: an endpoint's Retry-After now
-- pauses the limit key `push:<queue>`. The column stays, so this step only removes rows.)
DELETE FROM push_slots WHERE subscription_id IN (
    SELECT id FROM push_subscriptions WHERE queue_id NOT IN (SELECT id FROM queues));
DELETE FROM push_failures WHERE subscription_id IN (
    SELECT id FROM push_subscriptions WHERE queue_id NOT IN (SELECT id FROM queues));
DELETE FROM push_subscriptions WHERE queue_id NOT IN (SELECT id FROM queues);
