{{ full_table_history('users') }}
