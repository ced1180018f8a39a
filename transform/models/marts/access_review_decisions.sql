-- One row per decision of an access review: its certify task, the reviewer (who took the
-- last approval step: approved = certified, denied = decertified), the outcome and when (null
-- while undecided), and whether a decertified grant is still held after the review closed:
-- a grant interval of the same app, entitlement and app user that began by the close and was
-- not revoked by then, or a grant the service holds now (current_grants: its latest
-- complete `grants` snapshot) that began by the close, counted only when that snapshot was
-- read after the close: an older snapshot (grants not read since, or a review that closed
-- during the run, after grants were read) may hold a grant revoked before the close. The
-- second finds a grant older than the feed, which has no interval covering the close (or
-- none at all).
with certifications as (
    select *
    from {{ ref('stg_tasks') }}
    where task_type = 'certify'
),

last_steps as (
    select
        task_id,
        user_id,
        row_number() over (partition by task_id order by decided_at desc nulls last, user_id) as recency
    from {{ ref('stg_task_approvals') }}
),

decisions as (
    select
        certifications.*,
        reviews.display_name as access_review_name,
        reviews.state as access_review_state,
        reviews.closed_at as access_review_closed_at,
        last_steps.user_id as reviewer_user_id
    from certifications
    left join {{ ref('stg_access_reviews') }} as reviews
        on reviews.access_review_id = certifications.access_review_id
    left join last_steps
        on last_steps.task_id = certifications.task_id
        and last_steps.recency = 1
),

held_after_close as (
    -- held across the close: an interval of the feed, or the service's grant of now (read_at:
    -- its latest complete snapshot, which must postdate the close; null for the feed's
    -- intervals, dated by their own events), held from its start and not revoked as of then
    select distinct decisions.task_id
    from decisions
    inner join (
        select
            app_id,
            app_entitlement_id,
            app_user_id,
            granted_at,
            revoked_at,
            cast(null as {{ type_timestamp_tz() }}) as read_at
        from {{ ref('grant_intervals') }}
        union all
        select
            app_id,
            app_entitlement_id,
            app_user_id,
            granted_at,
            cast(null as {{ type_timestamp_tz() }}) as revoked_at,
            (
                select max(snapshots.snapshot_at)
                from ({{ complete_snapshots('grants') }}) as snapshots
            ) as read_at
        from {{ ref('current_grants') }}
        where held_per = 'service'
    ) as held
        on held.app_id = decisions.app_id
        and held.app_entitlement_id = decisions.app_entitlement_id
        and held.app_user_id = decisions.app_user_id
    where decisions.access_review_closed_at is not null
        and (held.read_at is null or held.read_at > decisions.access_review_closed_at)
        and (held.granted_at is null or held.granted_at <= decisions.access_review_closed_at)
        and (held.revoked_at is null or held.revoked_at > decisions.access_review_closed_at)
)

select
    named.access_review_id,
    named.access_review_name,
    named.access_review_state,
    named.access_review_closed_at,
    named.task_id,
    named.numeric_id,
    named.app_id,
    named.app_display_name,
    named.app_entitlement_id,
    named.app_entitlement_display_name,
    named.app_user_id,
    named.identity_user_id as subject_user_id,
    subjects.display_name as subject_name,
    named.reviewer_user_id,
    reviewers.display_name as reviewer_name,
    named.outcome,
    named.outcome_at as decided_at,
    case
        when named.outcome = 'CERTIFY_OUTCOME_DECERTIFIED' and held_after_close.task_id is not null
            then true
        else false
    end as decertified_still_held
from ({{ with_catalog_names('decisions') }}) as named
left join held_after_close
    on held_after_close.task_id = named.task_id
left join {{ ref('stg_users') }} as subjects
    on subjects.user_id = named.identity_user_id
left join {{ ref('stg_users') }} as reviewers
    on reviewers.user_id = named.reviewer_user_id
