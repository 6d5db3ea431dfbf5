-- Why a bulk operation was ended before it was through (StopBulk): a
-- re-drive stops when its endpoint is suspended again. Empty when not.
ALTER TABLE bulk_ops ADD COLUMN stopped TEXT NOT NULL DEFAULT '';
