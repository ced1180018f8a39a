{% macro with_people(relation) -%}
    {#-
      The person behind each row's account (macros.yml): the account's owner, type and
      status from stg_app_users, the owner's names and statuses from stg_users. In a mart:
          from ({{ with_people(ref('current_grants')) }}) as held
    -#}
    select
        without_people.*,
        accounts.user_id,
        users.display_name as user_display_name,
        users.email as user_email,
        users.status as user_status,
        users.directory_status as user_directory_status,
        users.user_id is not null as user_listed,
        accounts.display_name as app_user_display_name,
        accounts.app_user_type,
        accounts.status as app_user_status,
        accounts.app_user_id is not null as app_user_listed
    from {{ relation }} as without_people
    left join {{ ref('stg_app_users') }} as accounts
        on accounts.app_id = without_people.app_id
        and accounts.app_user_id = without_people.app_user_id
    left join {{ ref('stg_users') }} as users
        on users.user_id = accounts.user_id
{%- endmacro %}
