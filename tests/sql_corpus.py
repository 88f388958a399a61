"""Spark SQL that `validate`'s column checks must accept (VALID) and must refuse (INVALID), over two
views with declared schemas. tests/test_columns.py runs every query through the checks without a
JVM, and through Spark itself, so each entry is known to be what it claims."""

from __future__ import annotations

EVENTS = (
    "id BIGINT, name STRING, ts TIMESTAMP, amount DOUBLE, qty INT, tags ARRAY<STRING>, attrs MAP<STRING, STRING>, "
    "geo STRUCT<lat: DOUBLE, lon: DOUBLE>, items ARRAY<STRUCT<sku: STRING, n: INT>>, day DATE, price DECIMAL(10,2), "
    "flag BOOLEAN, local TIMESTAMP_NTZ, CamelCase STRING"
)
PEOPLE = "name STRING, country STRING, since TIMESTAMP, `home town` STRING"
VIEWS = {"cx_events": EVENTS, "cx_people": PEOPLE}

VALID = [
    # plain, case-insensitive names, back-quotes, aliases used later in the same SELECT (lateral aliases)
    "select id, name from cx_events",
    "select ID, Name, camelcase, `CamelCase` as cc from cx_events",
    "select amount * 2 as doubled, doubled + 1 as more from cx_events",
    "select e.id, e.name from cx_events e where e.amount > 0 order by e.ts desc limit 10",
    # :: casts, try_cast, typed literals
    "select qty::bigint as q, amount::string as a, try_cast(name as int) as n, date'2026-01-01' as d from cx_events",
    "select cast(ts as date) as d, cast(price as double) as p, interval 1 day as i from cx_events",
    # GROUP BY ALL, ordinals, aliases, expressions equal to a group-by expression, HAVING
    "select name, count(*) as n from cx_events group by all",
    "select name, day, sum(amount) as total from cx_events group by 1, 2",
    "select upper(name) as who, count(*) as n from cx_events group by who",
    "select to_date(ts) as d, name, count(*) as n from cx_events group by to_date(ts), name having count(*) > 1",
    "select name, max_by(id, ts) as last_id, min_by(id, ts) as first_id from cx_events group by name",
    "select name, percentile_approx(amount, 0.95) as p95, collect_set(qty) as qs from cx_events group by name",
    "select count(*) as n, sum(amount) as total, avg(qty) as mean_qty from cx_events",
    "select name, day, count(*) as n from cx_events group by rollup(name, day)",
    "select name, day, count(*) as n, grouping(day) as g from cx_events group by cube(name, day)",
    "select name, day, count(*) as n from cx_events group by grouping sets ((name), (day), ())",
    "select name, count(*) filter (where amount > 10) as big from cx_events group by name",
    # window(): tumbling and sliding time windows, their struct fields
    "select window(ts, '1 minute') as w, count(*) as n from cx_events group by window(ts, '1 minute')",
    "select window.start, window.end, count(*) as n from cx_events group by window(ts, '10 minutes', '5 minutes')",
    "select w.start as s, n from (select window(ts, '1 hour') as w, count(*) as n from cx_events group by 1)",
    "select session_window(ts, '5 minutes') as s, name, count(*) as n from cx_events group by session_window(ts, '5 minutes'), name",
    # window functions, named windows, QUALIFY
    "select id, row_number() over (partition by name order by ts) as rn from cx_events",
    "select id, sum(amount) over w as running from cx_events window w as (partition by name order by ts)",
    "select id, lag(amount) over (partition by name order by ts) as previous from cx_events",
    "select id, name from cx_events qualify row_number() over (partition by name order by ts desc) = 1",
    # hints
    "select /*+ BROADCAST(p) */ e.id, p.country from cx_events e join cx_people p on e.name = p.name",
    "select /*+ REPARTITION(4) */ id from cx_events",
    "select /*+ COALESCE(1), MERGE(e) */ e.id from cx_events e",
    # higher-order functions and lambdas (names that are no column)
    "select transform(tags, t -> upper(t)) as up, filter(tags, t -> t != '') as kept from cx_events",
    "select aggregate(items, 0, (acc, it) -> acc + it.n) as total_n from cx_events",
    "select exists(items, it -> it.sku = 'x') as has_x, forall(tags, t -> length(t) > 0) as all_set from cx_events",
    "select transform(items, (it, i) -> named_struct('sku', it.sku, 'pos', i)) as positioned from cx_events",
    "select zip_with(tags, tags, (a, b) -> concat(a, b)) as twice, map_filter(attrs, (k, v) -> v is not null) as m from cx_events",
    "select array_sort(tags, (l, r) -> case when l < r then -1 when l > r then 1 else 0 end) as sorted from cx_events",
    "select reduce(items, 0, (acc, it) -> acc + it.n, acc -> acc * 2) as doubled from cx_events",
    # struct fields, maps, arrays
    "select geo.lat, geo.lon, cx_events.geo.lat as lat2 from cx_events",
    "select attrs['k'] as k, attrs.k as k2, tags[0] as first_tag, items.sku as skus, element_at(tags, 1) as t from cx_events",
    "select named_struct('a', id, 'b', name) as s from cx_events",
    "select geo.*, items[0].sku as first_sku from cx_events",
    "select lat, lon from (select geo.* from cx_events)",
    "select `Home Town`, `home town` as town, upper(`HOME TOWN`) as loud from cx_people",
    "select s.a from (select named_struct('a', id, 'b', name) as s from cx_events)",
    # generators: explode and friends, LATERAL VIEW, table functions
    "select explode(tags) as tag from cx_events",
    "select col from (select explode(tags) from cx_events)",
    "select pos, col from (select posexplode(tags) from cx_events)",
    "select key, value from (select explode(attrs) from cx_events)",
    "select tag from cx_events lateral view explode(tags) t as tag",
    "select t.col from cx_events lateral view explode(tags) t",
    "select id, it.sku from cx_events lateral view outer explode(items) x as it",
    "select inline(items) from cx_events",
    "select sku, n from (select inline(items) from cx_events)",
    "select stack(2, 'name', name, 'qty', qty::string) as (k, v) from cx_events",
    "select id from range(10)",
    "select * from explode(array(1, 2, 3))",
    "select c0, c1 from (select json_tuple('{\"a\": 1, \"b\": 2}', 'a', 'b'))",
    # PIVOT and UNPIVOT
    "select * from (select name, day, amount from cx_events) pivot (sum(amount) for day in (date'2026-01-01' as d1, date'2026-01-02' as d2))",
    "select name, d1 from (select name, day, amount from cx_events) pivot (sum(amount) for day in (date'2026-01-01' as d1))",
    "select * from (select id, amount, qty::double as qty from cx_events) unpivot (v for k in (amount, qty))",
    # stars
    "select * from cx_events",
    "select * except (tags, attrs) from cx_events",
    "select e.*, p.country from cx_events e left join cx_people p using (name)",
    "select *, amount * qty as value from cx_events",
    # joins of every kind
    "select e.id, p.country from cx_events e join cx_people p on e.name = p.name",
    "select id, country from cx_events join cx_people using (name)",
    "select * from cx_events natural join cx_people",
    "select id from cx_events e left semi join cx_people p on e.name = p.name",
    "select id from cx_events e left anti join cx_people p on e.name = p.name",
    "select e.id, p.name from cx_events e full outer join cx_people p on e.name = p.name",
    "select e.id, p.since from cx_events e cross join cx_people p",
    "select e.id, x.plus from cx_events e, lateral (select e.qty + 1 as plus) x",
    # subqueries, CTEs, set operations
    "with big as (select * from cx_events where amount > 100) select name, count(*) as n from big group by name",
    "with a as (select name from cx_events), b as (select name from cx_people) select name from a union select name from b",
    "select name from cx_events where name in (select name from cx_people where country = 'NL')",
    "select id from cx_events e where exists (select 1 from cx_people p where p.name = e.name)",
    "select id, (select max(since) from cx_people p where p.name = e.name) as since from cx_events e",
    "select name from cx_events intersect select name from cx_people",
    "select name from cx_events except select name from cx_people",
    "select q.total from (select sum(amount) as total from cx_events) q",
    "select id from (select * from cx_events) as sub(id, n, t, a, q, tg, at, g, it, d, p, f, l, cc)",
    # VALUES, functions without parentheses, sampling, ordering clauses
    "select * from values (1, 'a'), (2, 'b') as v(num, letter)",
    "select current_date as today, current_timestamp as now, current_user as who from cx_events",
    "select id from cx_events tablesample (10 percent)",
    "select id, name from cx_events distribute by name sort by id",
    "select id from cx_events cluster by id",
    "select name, amount from cx_events order by amount desc nulls last, 1",
    # conditionals, strings, regexes, dates
    "select if(amount > 0, 'pos', 'neg') as sign, case when qty > 1 then 'many' else 'one' end as size from cx_events",
    "select coalesce(name, 'nobody') as n, nvl(qty, 0) as q, nullif(name, '') as n2 from cx_events",
    "select name rlike '^a' as a, name like 'b%' as b, regexp_extract(name, '(x)', 1) as x from cx_events",
    "select date_trunc('hour', ts) as hour, unix_timestamp(ts) as epoch, date_format(ts, 'yyyy-MM') as month from cx_events",
    "select timestampadd(hour, 1, ts) as later, datediff(day, day) as zero, make_date(2026, 1, 1) as d from cx_events",
    "select to_json(named_struct('a', id)) as j, from_json('{\"a\": 1}', 'a INT') as parsed from cx_events",
    "select get_json_object('{\"a\": 1}', '$.a') as a, parse_json('{\"a\": 1}') as v from cx_events",
    "select variant_get(parse_json('{}'), '$.a', 'int') as a from cx_events",
    # keywords inside calls that are no columns: named arguments, units, SQL-standard forms
    "select mask(name, upperChar => 'X') as m from cx_events",
    "select extract(year from ts) as y, extract(dayofweek from ts) as dow, date_part('month', ts) as mo from cx_events",
    "select datediff(day, ts, ts) as d3, timestampdiff(minute, ts, ts) as td, date_add(day, 1) as da from cx_events",
    "select trim(both 'x' from name) as t, position('a' in name) as p, substring(name from 1 for 2) as s from cx_events",
    "select overlay(name placing 'x' from 1) as o, name is distinct from 'x' as d, qty div 2 as q from cx_events",
    "select percentile_cont(0.5) within group (order by amount) as med, listagg(name, ',') within group (order by name) as names from cx_events",
    "select name, any_value(amount) as a, first(amount, true) as f, count(distinct name, qty) as c from cx_events group by name",
    "select name as n, sum(amount) as total from cx_events group by n having total > 1 order by total desc, n",
    "select e.* from cx_events e lateral view explode(tags) v as tag",
    "select * from cx_events lateral view explode(tags) v as tag",
    "select * from cx_events lateral view explode(tags) v",
    "select uuid() as u, rand() as r, input_file_name() as f, current_timezone() as tz from cx_events",
    "select name, count(1) as n from cx_events where name is not null group by name limit 5 offset 2",
]

#: (query, what the check says) for queries Spark refuses too
INVALID = [
    ("select id, nam from cx_events", "unknown column 'nam'"),
    ("select e.id, e.nam from cx_events e", "unknown column 'e.nam'"),
    ("select id from cx_events where amuont > 1", "unknown column 'amuont'"),
    ("select id from cx_events order by tss", "unknown column 'tss'"),
    ("with c as (select id from cx_events) select id, name from c", "unknown column 'name'"),
    ("select id from cx_events union all select countri from cx_people", "unknown column 'countri'"),
    ("select id from cx_events e where e.name in (select name from cx_people where contry = 'NL')", "unknown column 'contry'"),
    ("select e.id, p.country from cx_events e join cx_people p on e.name = p.nme", "unknown column 'p.nme'"),
    ("select name, amount, count(*) as n from cx_events group by name", "column 'amount' is neither in GROUP BY"),
    ("select name, count(*) as n from cx_events", "column 'name' is neither in a GROUP BY"),
    ("select qty, sum(amount) as total from cx_events group by qty + 1", "column 'qty' is neither in GROUP BY"),
]
