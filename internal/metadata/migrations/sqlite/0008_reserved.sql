-- 0008 is reserved for the in-sandbox API limits (branch h-inside), which
-- merge with their own 0008 file: this placeholder is deleted then. It
-- exists only so that 0009 can be applied on this branch alone.
SELECT 1;
