-- Per-service response statistics over both invocation streams.
select
  requested_service,
  head_service,
  count(*)                        as calls,
  count(distinct client_ip)       as clients,
  round(avg(response_ms), 1)      as avg_response_ms,
  {{ p95('response_ms') }}        as p95_response_ms,
  min(ts)                         as first_call,
  max(ts)                         as last_call
from {{ ref('all_calls') }}
where ts >= to_timestamp({{ var('since') | lit }})
group by requested_service, head_service
having count(*) >= {{ var('min_calls') | lit }}
