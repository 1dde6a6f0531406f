-- A user's words are stored once per client request key (HTTP Idempotency-Key): a retried
-- turn finds its message and is answered from it, in the same commit that wrote the turn.
ALTER TABLE messages ADD COLUMN request_key text;
CREATE UNIQUE INDEX messages_request_key ON messages (user_id, request_key)
    WHERE request_key IS NOT NULL;
