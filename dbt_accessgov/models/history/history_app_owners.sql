{{ full_table_history('app_owners') }}
