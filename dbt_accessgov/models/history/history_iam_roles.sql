{{ full_table_history('iam_roles') }}
