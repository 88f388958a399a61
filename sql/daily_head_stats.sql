-- One row per day and page (head service): how many page views and how slow the whole page was.
select
  to_date(ts)                     as day,
  head_service,
  count(*)                        as invocations,
  count(distinct client_ip)       as clients,
  {{ p95('response_ms') }}        as p95_response_ms
from {{ ref('all_calls') }}
group by to_date(ts), head_service
