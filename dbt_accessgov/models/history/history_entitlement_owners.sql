{{ full_table_history('entitlement_owners') }}
