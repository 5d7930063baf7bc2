-- 0020 is another branch's migration (issue 22 work was given 0021); this
-- placeholder keeps the versions without a gap until that branch is
-- merged, and is then replaced by it. It changes nothing.
SELECT 1;
