-- The W3C trace context (traceparent) of the ingest that stored the
-- message, so that its attempts continue the sender's trace. NULL when
-- the message came without tracing.
ALTER TABLE messages ADD COLUMN trace_parent TEXT;
