-- Regions (extensions part 11; docs/several-nodes.md, Regions). Each node runs in one
-- region (`uptrio serve --region`, default `default`).
ALTER TABLE nodes ADD COLUMN region text NOT NULL DEFAULT 'default';

-- Leases per region and bucket: `pool_leases` holds every pool's. The pool of monitors
-- without `regions` (and of every heartbeat), probed by one node of any region, keeps its
-- 256 rows under region '' (not NULL: the region is part of the key); each region has its
-- own 256 rows, made when the first node of that region registers
-- (store.leases.register_node) and claimed only by live nodes of that region.
ALTER TABLE bucket_leases RENAME TO pool_leases;
ALTER TABLE pool_leases ADD COLUMN region text NOT NULL DEFAULT '';
ALTER TABLE pool_leases DROP CONSTRAINT bucket_leases_pkey;
ALTER TABLE pool_leases ADD PRIMARY KEY (region, bucket);

-- `bucket_leases` stays what it was, the any-region pool's 256 rows (a simple view, so
-- it may be updated too), for the queries written against it before regions.
CREATE VIEW bucket_leases AS
    SELECT bucket, node, epoch, expires_at FROM pool_leases WHERE region = '';
