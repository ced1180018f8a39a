-- Who reviews each app entitlement of the catalog: each owner of its own
-- ('entitlement_owner'), or, for an entitlement without one, each owner of its app
-- ('app_owner'); an entitlement whose app has no owner either has no row (unowned_entitlements
-- lists those held now). None while no run has read entitlement_owners in full: whether an
-- entitlement has owners of its own is then unknown. The reviewer as the directory lists them
-- now (stg_users), as the other marts show people; an owner the directory no longer lists
-- as the owner list sent them.
with own_owners as (
    select app_id, app_entitlement_id, user_id, display_name, email, status,
        'entitlement_owner' as reviewer_source
    from {{ ref('stg_entitlement_owners') }}
),

owned as (
    select distinct app_id, app_entitlement_id from own_owners
),

app_owners as (
    select
        entitlements.app_id,
        entitlements.app_entitlement_id,
        owners.user_id,
        owners.display_name,
        owners.email,
        owners.status,
        'app_owner' as reviewer_source
    from ({{ catalog_entitlements() }}) as entitlements
    inner join {{ ref('stg_app_owners') }} as owners
        on owners.app_id = entitlements.app_id
    left join owned
        on owned.app_id = entitlements.app_id
        and owned.app_entitlement_id = entitlements.app_entitlement_id
    where owned.app_id is null and {{ stream_was_read('entitlement_owners') }}
),

reviewers as (
    select own_owners.*
    from own_owners
    inner join ({{ catalog_entitlements() }}) as entitlements
        on entitlements.app_id = own_owners.app_id
        and entitlements.app_entitlement_id = own_owners.app_entitlement_id
    union all
    select * from app_owners
)

select
    reviewers.app_id,
    reviewers.app_entitlement_id,
    reviewers.user_id,
    case when users.user_id is not null then users.email else reviewers.email end as user_email,
    case when users.user_id is not null then users.display_name else reviewers.display_name end
        as user_display_name,
    case when users.user_id is not null then users.status else reviewers.status end as user_status,
    reviewers.reviewer_source
from reviewers
left join {{ ref('stg_users') }} as users
    on users.user_id = reviewers.user_id
