-- The embedded store's indexes (FerretDB v1 on PostgreSQL): GIN expression indexes beside the
-- tables FerretDB makes, so the equality filters FerretDB pushes down as `_jsonb->'f' @> '"v"'`
-- are served by an index instead of a scan (../../../docs/ferretdb-backends.md; FerretDB's own
-- btree indexes, made for `createIndexes`, can never serve `@>`). Real MongoDB needs none of this:
-- the indexes `hookbay-admin migrate` declares serve the same queries there.
--
-- Applied by deploy/local/infra.sh to the `ferretdb` database every time PostgreSQL starts:
-- idempotent. An event trigger gives every table FerretDB creates later its indexes at once, in
-- the transaction that creates it, so a collection created (or dropped and created again) by any
-- database — `make run`'s, each test worker's, a benchmark's — is indexed from its first document;
-- the DO block at the end indexes tables that existed before the trigger did (only the indexes
-- missing: a re-run takes no lock on any table).
--
-- Without a pending list (`fastupdate = off`): with PostgreSQL's default, inserts append to a
-- pending list of up to 4 MB that every look-up scans until autovacuum merges it; under a steady
-- write load look-ups by `_id` took 2.8 ms instead of 0.8 ms (measured at a million events, 64k
-- pending entries), and the recorder's status updates (one look-up each) slowed down as much.
--
-- FerretDB names a collection's table `<collection>_<8 hex digits>` in the schema named after the
-- database; the fields per collection are the ones hookbay filters on by equality. Index names are
-- `<table>_gin_<fields>`; the indexes of an earlier list stay (harmless, dropped with the table).

CREATE OR REPLACE FUNCTION hookbay_gin_fields(collection text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE collection
    WHEN 'events' THEN ARRAY['_id', 'request_id', 'username', 'webhook_id+page']
    WHEN 'event_bodies' THEN ARRAY['_id', 'username', 'webhook_id+page']
    WHEN 'event_pages' THEN ARRAY['_id', 'username', 'webhook_id']
    WHEN 'event_books' THEN ARRAY['_id', 'username', 'webhook_id']
    WHEN 'event_counters' THEN ARRAY['_id', 'username']
    WHEN 'attempts' THEN ARRAY['_id', 'event_id', 'username', 'webhook_id+event_page']
    WHEN 'stats_minutes' THEN ARRAY['_id', 'username+day', 'webhook_id+day']
    WHEN 'stats_hours' THEN ARRAY['_id', 'username+day', 'webhook_id+day']
    WHEN 'sessions' THEN ARRAY['_id', 'username']
    WHEN 'api_tokens' THEN ARRAY['_id', 'token_hash', 'username']
    WHEN 'webhooks' THEN ARRAY['_id', 'username']
    WHEN 'held_deliveries' THEN ARRAY['_id', 'destination+page']
    WHEN 'held_lanes' THEN ARRAY['_id', 'held']
    WHEN 'destinations' THEN ARRAY['_id', 'username']
    WHEN 'transformations' THEN ARRAY['_id', 'username']
    WHEN 'issues' THEN ARRAY['_id', 'username', 'username+key', 'username+status']
    WHEN 'alert_channels' THEN ARRAY['_id', 'username']
    ELSE ARRAY['_id']
  END
$$;

CREATE OR REPLACE FUNCTION hookbay_gin_index_table(schema_name text, table_name text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  collection text := substring(table_name FROM '^(.+)_[0-9a-f]{8}$');
  field text;
  index_name text;
  columns text;
BEGIN
  IF collection IS NULL OR table_name LIKE '\_ferretdb%' THEN
    RETURN;
  END IF;
  FOREACH field IN ARRAY hookbay_gin_fields(collection) LOOP
    -- 'a+b' is one two-column index: a query on both reads one index (a page of a webhook)
    index_name := table_name || '_gin_' || replace(trim(LEADING '_' FROM field), '+', '_');
    SELECT string_agg(format('(_jsonb -> %L) jsonb_path_ops', part), ', ')
      INTO columns FROM unnest(string_to_array(field, '+')) AS part;
    -- checked first: CREATE INDEX IF NOT EXISTS would still lock the table against writes
    IF to_regclass(format('%I.%I', schema_name, index_name)) IS NULL THEN
      EXECUTE format('CREATE INDEX %I ON %I.%I USING gin (%s) WITH (fastupdate = off)',
                     index_name, schema_name, table_name, columns);
    ELSIF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = format('%I.%I', schema_name, index_name)::regclass
                      AND 'fastupdate=off' = ANY (reloptions)) THEN
      -- an index made before fastupdate was turned off: once (a brief lock), then its pending
      -- list is merged into the index
      EXECUTE format('ALTER INDEX %I.%I SET (fastupdate = off)', schema_name, index_name);
      PERFORM gin_clean_pending_list(format('%I.%I', schema_name, index_name)::regclass);
    END IF;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hookbay_gin_on_create() RETURNS event_trigger
LANGUAGE plpgsql AS $$
DECLARE
  created record;
BEGIN
  FOR created IN
    SELECT c.relnamespace::regnamespace::text AS schema_name, c.relname::text AS table_name
    FROM pg_event_trigger_ddl_commands() AS d JOIN pg_class AS c ON c.oid = d.objid
    WHERE d.command_tag = 'CREATE TABLE' AND d.object_type = 'table'
  LOOP
    PERFORM hookbay_gin_index_table(trim(BOTH '"' FROM created.schema_name), created.table_name);
  END LOOP;
END
$$;

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'hookbay_gin_on_create') THEN
    CREATE EVENT TRIGGER hookbay_gin_on_create ON ddl_command_end
      WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION hookbay_gin_on_create();
  END IF;
END
$$;

DO $$
DECLARE
  t record;
BEGIN
  FOR t IN
    SELECT schemaname, tablename FROM pg_tables
    WHERE schemaname NOT IN ('pg_catalog', 'information_schema', 'public')
  LOOP
    PERFORM hookbay_gin_index_table(t.schemaname, t.tablename);
  END LOOP;
END
$$;
