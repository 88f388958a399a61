{#- Statistics used by several pipelines. -#}

{% macro percentile(column, fraction) -%}
percentile_approx({{ column }}, {{ fraction | lit }})
{%- endmacro %}

{% macro p95(column) -%}
{{ percentile(column, 0.95) }}
{%- endmacro %}
