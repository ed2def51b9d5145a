//! [`quarry_store::AccessStore`] on PostgreSQL.
#![allow(unused_variables)] // the methods still `pending` ignore their arguments

use super::*;

impl AccessStore for PgStore {
    fn create_space(&self, name: &str, description: &str) -> Result<Space> {
        Err(pending("create_space"))
    }

    fn spaces(&self) -> Result<Vec<Space>> {
        Err(pending("spaces"))
    }

    fn space(&self, key: &str) -> Result<Option<Space>> {
        Err(pending("space"))
    }

    fn delete_space(&self, name: &str) -> Result<()> {
        Err(pending("delete_space"))
    }

    fn create_user(&self, name: &str) -> Result<User> {
        Err(pending("create_user"))
    }

    fn users(&self) -> Result<Vec<User>> {
        Err(pending("users"))
    }

    fn user(&self, key: &str) -> Result<Option<(i64, User)>> {
        Err(pending("user"))
    }

    fn delete_user(&self, user_row: i64) -> Result<()> {
        Err(pending("delete_user"))
    }

    fn grant(&self, user_row: i64, space: &str, role: Role) -> Result<()> {
        Err(pending("grant"))
    }

    fn revoke_membership(&self, user_row: i64, space: &str) -> Result<bool> {
        Err(pending("revoke_membership"))
    }

    fn memberships(&self, user_row: Option<i64>) -> Result<Vec<Membership>> {
        Err(pending("memberships"))
    }

    fn insert_token(&self, new: &NewToken) -> Result<TokenRecord> {
        Err(pending("insert_token"))
    }

    fn tokens(&self, user_row: Option<i64>) -> Result<Vec<TokenRecord>> {
        Err(pending("tokens"))
    }

    fn token_by_hash(&self, hash: &str) -> Result<Option<TokenGrant>> {
        Err(pending("token_by_hash"))
    }

    fn token_chain(&self, id: &str) -> Result<Vec<TokenRecord>> {
        Err(pending("token_chain"))
    }

    fn revoke_token(&self, key: &str, user_row: Option<i64>, at: i64) -> Result<bool> {
        Err(pending("revoke_token"))
    }

    fn touch_token(&self, id: &str, at: i64) -> Result<()> {
        Err(pending("touch_token"))
    }

    fn collection_ids(&self, space: &str, keys: &[String]) -> Result<Vec<(i64, String)>> {
        Err(pending("collection_ids"))
    }
}
