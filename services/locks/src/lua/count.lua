-- The number of live locks, after sweeping expired ones out of the indexes.
-- ARGV: prefix. Reply: {{count}}.
sweep()
return {{tostring(redis.call('ZCOUNT', P .. 'expiry', '(' .. at_ms(0), '+inf'))}}
