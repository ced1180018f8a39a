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
    -- held across the close, one join per source so that each looks its rows up through its
    -- table's index (a join over their union scanned both for every decision: the plan guard
    -- of tests/test_models.py): an interval of the feed, dated by its own events, or the
    -- service's grant of now, counted only when its snapshot (the latest complete one)
    -- postdates the close (with no complete snapshot there is none to postdate it, and
    -- current_grants is the fold of the feed: its intervals already count); either held from
    -- its start and not revoked as of the close
    select distinct held.task_id
    from (
        select decisions.task_id
        from decisions
        inner join {{ ref('int_feed_intervals') }} as intervals
            on intervals.app_id = decisions.app_id
            and intervals.app_entitlement_id = decisions.app_entitlement_id
            and intervals.app_user_id = decisions.app_user_id
        where decisions.access_review_closed_at is not null
            and (intervals.granted_at is null or intervals.granted_at <= decisions.access_review_closed_at)
            and (intervals.revoked_at is null or intervals.revoked_at > decisions.access_review_closed_at)
        union all
        select decisions.task_id
        from decisions
        inner join {{ ref('current_grants') }} as service_grants
            on service_grants.app_id = decisions.app_id
            and service_grants.app_entitlement_id = decisions.app_entitlement_id
            and service_grants.app_user_id = decisions.app_user_id
        where decisions.access_review_closed_at is not null
            and (service_grants.granted_at is null or service_grants.granted_at <= decisions.access_review_closed_at)
            and (
                select max(snapshots.snapshot_at)
                from ({{ complete_snapshots('grants') }}) as snapshots
            ) > decisions.access_review_closed_at
    ) as held
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
